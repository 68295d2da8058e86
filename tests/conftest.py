# The tests run with the backend a program gets (dflash/backend.py), chosen before any test
# module imports mlx.
from dflash import backend

backend.setup()
