"""Writes the generated reference pages into the site as it is built (mkdocs-gen-files runs
this; `make docs`). Nothing is written into docs/: the pages exist only in the build."""

import sys
from pathlib import Path

import mkdocs_gen_files

sys.path.insert(0, str(Path(__file__).resolve().parent))

from refgen import pages

for path, markdown in pages().items():
    with mkdocs_gen_files.open(path, "w") as page:
        page.write(markdown)
    mkdocs_gen_files.set_edit_path(path, "gen_reference.py")
