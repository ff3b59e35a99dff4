"""``python -m <package> doctor`` checks this machine; ``check`` trains, resumes, evaluates, exports and
runs msrun on its device; ``predict --onnx FILE INPUT`` runs an exported ONNX network without MindSpore."""

import sys
from pathlib import Path

if __name__ == "__main__":
    command = sys.argv[1:2]
    here = Path(__file__).resolve().parent
    # doctor, check and predict are optional features: a project generated without one says how to add it.
    for feature, name, module in (("doctor", "doctor", "doctor.py"), ("check", "check", "check.py"),
                                  ("onnx", "predict", "deploy/predict.py")):
        if command == [name] and not (here / module).is_file():
            print(f"{name}: not in this project (the {feature} feature): add it with `msscaffold add {feature}`",
                  file=sys.stderr)
            sys.exit(1)
    if command == ["doctor"]:
        from .doctor import main

        sys.exit(main(sys.argv[2:], project=Path(__file__).resolve().parents[1]))
    if command == ["check"]:
        from .check import main

        sys.exit(main(sys.argv[2:], project=Path(__file__).resolve().parents[1]))
    if command == ["predict"]:
        from .deploy.predict import main

        sys.exit(main(sys.argv[2:]))
    print(f"usage: python -m {__package__} doctor [--project DIR] | check [--device D] | predict --onnx FILE INPUT",
          file=sys.stderr)
    sys.exit(2)
