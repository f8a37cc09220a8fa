from reslint.cli import main

main()
