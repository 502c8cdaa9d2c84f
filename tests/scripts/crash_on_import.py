import torch  # noqa: F401

import a_module_that_does_not_exist  # noqa: F401
