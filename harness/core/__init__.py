"""The core: the case model, inputs, comparison, the contract and registry, the reference computation."""
