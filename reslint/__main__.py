from reslint.cli import script

script()
