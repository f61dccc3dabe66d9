"""`python -m collabzoo.cli` (and `torchrun ... -m collabzoo.cli`): the `collabzoo` command."""

from collabzoo.cli import main

raise SystemExit(main())
