"""One module per paper: data -> library method -> metrics -> claims -> figures.

See :mod:`iclr26.registry` for the contract each module follows.
"""
