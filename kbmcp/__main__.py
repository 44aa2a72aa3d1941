from kbmcp.cli import main

main()
