"""The engine: statistics of the data under a feature map, the log marginal likelihood and its
gradient, the posterior, the factorized systems, the noise models and the exact reference GP.

It reads data sources (:mod:`scalegp.data`) and feature maps (:mod:`scalegp.features`), and
knows nothing of estimators, model files or the command line (docs/engine.md).
"""
