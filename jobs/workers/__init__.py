"""Ray Train workers and the Tune trial: batches in, reports and checkpoints out."""
