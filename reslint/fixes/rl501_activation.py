"""placeholder"""
SAFE = False
TITLE = ""


def fix(source, finding):
    return None
