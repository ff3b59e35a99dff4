"""``python -m <package> doctor`` checks this machine; ``check`` trains, resumes, evaluates, exports and
runs msrun on its device; ``predict --onnx FILE INPUT`` runs an exported ONNX network without MindSpore."""

import importlib.util
import sys
from pathlib import Path

# command -> (the optional feature it is part of, its module): without the feature, how to add it
COMMANDS = {"doctor": ("doctor", "doctor"), "check": ("check", "check"), "predict": ("onnx", "deploy.predict")}

if __name__ == "__main__":
    command = sys.argv[1] if len(sys.argv) > 1 else None
    if command not in COMMANDS:
        print(f"usage: python -m {__package__} doctor [--project DIR] | check [--device D] | predict --onnx FILE INPUT",
              file=sys.stderr)
        sys.exit(2)
    feature, module = COMMANDS[command]
    if importlib.util.find_spec(f"{__package__}.{module}") is None:
        print(f"{command}: not in this project (the {feature} feature): add it with `msscaffold add {feature}`",
              file=sys.stderr)
        sys.exit(1)
    main, argv = importlib.import_module(f"{__package__}.{module}").main, sys.argv[2:]
    sys.exit(main(argv) if command == "predict" else main(argv, project=Path(__file__).resolve().parents[1]))
