from detective.cli import main

main()
