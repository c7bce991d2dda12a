"""What `horovodrun --check-build` says of Horovod's frameworks and controllers, in one
process, in its words ("[X] PyTorch").

horovodrun forks a process per line, each importing horovod.<framework> afresh
(horovod/runner/launch.py, check_build; horovod/common/util.py, _check_extension_lambda):
20-34 s a node on half-core nodes, every deploy. The answers are the same: a framework
is marked when horovod.<framework> imports (extension_available); a controller when the
first framework that imports, in util.EXTENSIONS order, says it was built with it
(mpi_built, gloo_built). Run by the stack role's verify step with the stack's Python.
"""

import contextlib
import importlib

# horovod/common/util.py EXTENSIONS, with the names check_build prints for them.
FRAMEWORKS = {"tensorflow": "TensorFlow", "torch": "PyTorch", "mxnet": "MXNet"}
CONTROLLERS = {"MPI": "mpi_built", "Gloo": "gloo_built"}


def main() -> None:
    loaded = {}
    for module, name in FRAMEWORKS.items():
        # As _check_extension_lambda: any failure to import is "not built".
        with contextlib.suppress(Exception):
            loaded[module] = importlib.import_module(f"horovod.{module}")
        print(f"[{'X' if module in loaded else ' '}] {name}")
    first = next(iter(loaded.values()), None)
    for name, built in CONTROLLERS.items():
        print(f"[{'X' if first is not None and getattr(first, built)() else ' '}] {name}")


if __name__ == "__main__":
    main()
