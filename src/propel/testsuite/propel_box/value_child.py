"""The graded process of value grading: import the model's module, then answer ``candidate(*args)`` calls with plain
data. Started fresh (``python3 -I -S``, never forked from the runner: it holds no test and no expected value).

Its first stdin line is its configuration; before importing anything of the model's it confines itself (Landlock:
only its workspace and the interpreter's runtime readable, only a scratch folder writable) and installs the audit
hook. Then each stdin line is a call, answered by one line on the response fd: the value (``codec.encode``), the
exception it raised, or why the value is not plain data. Audit findings are sent on the same fd as they happen.
Nothing here is trusted by the runner: the model's code shares this process and may rewrite any of it; what it can
send back is plain data, and plain data is judged by the runner.
"""

import json
import sys


def main():
    config = json.loads(sys.stdin.readline())
    sys.path.insert(0, config["box"])
    from propel_box import codec
    from propel_box.graded_start import start_graded

    send, graded_dir = start_graded(config, [config["ws"]])
    function, failure = None, None
    try:
        module = __import__(config["module"])
        function = getattr(module, config["entry"])
    except BaseException as e:  # noqa: BLE001 - whatever the module does at import is the answer
        failure = {"raised": type(e).__name__, "message": str(e)[:300], "base": not isinstance(e, Exception)}
    send({"ready": failure is None, **({"import": failure} if failure else {})})
    for line in sys.stdin:
        request = json.loads(line)
        answer = {"id": request["id"]}
        if function is None:
            answer.update(failure or {"raised": "ImportError", "message": "no entry point", "base": False})
            send(answer)
            continue
        try:
            args = codec.decode(request["args"])
            kwargs = codec.decode(request["kwargs"])
            value = function(*args, **kwargs)
        except BaseException as e:  # noqa: BLE001
            answer.update(raised=type(e).__name__, message=str(e)[:300], base=not isinstance(e, Exception))
            send(answer)
            continue
        try:
            answer["value"] = codec.encode(value)
        except codec.NotPlain as e:
            answer["not_plain"] = str(e)[:300]
        except BaseException as e:  # noqa: BLE001 - a value whose own methods raise while being read
            answer["not_plain"] = f"reading the value raised {type(e).__name__}"
        try:
            answer["own_eq"] = codec.own_equality(value, graded_dir)
        except BaseException:  # noqa: BLE001
            answer["own_eq"] = True
        send(answer)


if __name__ == "__main__":
    main()
