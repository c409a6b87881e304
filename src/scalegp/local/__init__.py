"""Local models: centred models around a feature map, neighbourhood-local GPs, the clustering
that places their centres and the checks of what an approximation can resolve
(docs/local-models.md).
"""
