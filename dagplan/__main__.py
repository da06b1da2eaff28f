from dagplan.cli import main

if __name__ == "__main__":  # `python -m dagplan`; importing the module (a docs generator, a linter) runs nothing
    main()
