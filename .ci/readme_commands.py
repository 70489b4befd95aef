"""Print the README's two opening commands, one per line: the command lines (not comments, not blank) of its first
```bash block, which must be exactly two: the set-up that runs the main job, then the test command."""

import re
import sys
from pathlib import Path

text = Path(sys.argv[1]).read_text()
block = re.search(r"^```bash\n(.*?)^```", text, re.S | re.M)
if block is None:
    sys.exit(f"{sys.argv[1]}: no ```bash block")
commands = [line for line in block.group(1).splitlines() if line.strip() and not line.lstrip().startswith("#")]
if len(commands) != 2:
    sys.exit(f"{sys.argv[1]}: the first ```bash block holds {len(commands)} commands, expected 2 (set-up, tests)")
print("\n".join(commands))
