from kbmcp.entry import main

main()
