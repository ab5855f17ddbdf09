def accuracy_on_device(logits, labels):
    return (logits.argmax(-1) == labels).float().mean()
