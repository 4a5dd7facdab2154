"""``python -m dpcurator`` runs the command line."""

from dpcurator.cli import main

main()
