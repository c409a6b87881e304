"""The scikit-learn face of the package: the low-rank, exact and Gibbs GP regressors, the
feature-map transformer, and the plumbing of a fit over arrays or streamed sources.
"""
