from harness.cli import main
from harness.runtime.teardown import exit_now

exit_now(main())
