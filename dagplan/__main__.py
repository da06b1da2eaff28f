from dagplan.cli import main

main()
