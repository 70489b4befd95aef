from recx.launcher import main

main()
