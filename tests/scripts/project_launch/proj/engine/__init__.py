from .launch import launch
from .options import argument_parser
