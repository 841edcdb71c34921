"""The storage seam: the one way the store engine reaches stored bytes.

`Storage` (in `base`) is seven operations on relative, '/'-separated keys;
`local.LocalStorage` is the first backend (a directory, through directory
fds). A second backend (object storage) is an added module, not a rewrite:
the engine's rules (a record is written once, its marker last) are written
against these operations only.
"""
