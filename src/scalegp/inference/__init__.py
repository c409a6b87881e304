"""Inference of the hyperparameters: L-BFGS-B on the log marginal likelihood, Gibbs sampling,
Nystrom knots learned with the hyperparameters, and the node search of Gauss-Legendre features.

It drives the engine's objectives; it knows nothing of estimators, model files or the command
line.
"""
