"""Batch prediction and serving parts without Ray: the predictor (jobs/predict.py runs it in Ray Data)."""
