"""What the training loops run on, without Ray: task data and metrics, data position, epoch streams, loss guard."""
