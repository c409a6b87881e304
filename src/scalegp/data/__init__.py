"""Data: the data-source protocol, sources over arrays, files, grids and Dask collections, the
readers of table files and the standardization wrappers (docs/data-sources.md).

The lowest wing above the package's helpers: it imports no feature map, no engine and no
estimator.
"""
