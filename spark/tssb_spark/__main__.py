"""`python -m tssb_spark ...` runs the CLI."""
from tssb_spark.cli import main

main()
