from recx.cli.launcher import main

main()
