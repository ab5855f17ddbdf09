def log_accuracy(logits, labels):
    accuracy = (logits.argmax(-1) == labels).float().mean()
    print("accuracy", accuracy.item())  # RC001, reached from train_step via compute_loss
