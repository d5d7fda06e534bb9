"""A stand-in ``mpi4py`` package whose ``MPI`` module maps mpi4py's names to OmniCCL's.

Only for running mpi4py's own unit tests against ``omniccl.Communicator``
(see ../run_suite.py); not part of the omniccl package.
"""

import omniccl as _omniccl

__version__ = "omniccl-" + _omniccl.__version__
