from recx.cli import main

main()
