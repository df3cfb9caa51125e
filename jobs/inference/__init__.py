"""Batch prediction and serving parts: the predictor (no Ray), the output's shards, and the stages jobs/predict.py
runs in Ray Data's tasks and actors."""
