from tssb.cli import main

main()
