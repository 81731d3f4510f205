"""Other library versions: building environments, the version matrix, upgrade and bisect."""
