from kqueue.cli.main import main

main()
