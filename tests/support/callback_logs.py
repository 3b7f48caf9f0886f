"""Whether tf-keras converts each batch's logs to numpy for a CallbackList
(a Horovod fit must not: it would sync every step)."""


def forces_numpy_batch_logs(callback_list) -> bool:
    """True when tf-keras will convert every batch's logs to numpy.

    Mirrors CallbackList._process_logs: batch hooks are called at all only
    if some callback implements one, and their logs stay tensors if every
    callback supports tensor logs, or every one with a batch hook does.
    """
    # pylint: disable=protected-access
    return bool(callback_list._should_call_train_batch_hooks and
                not callback_list._supports_tf_logs and
                not callback_list._batch_hooks_support_tf_logs)
