# Builds a large nested structure in several threads, serialises it (json, pickle) and prints
# digests: deterministic output, lots of small allocations from several threads.
import hashlib, json, pickle, threading

results = {}

def work(tid):
    data = {}
    for i in range(40000):
        key = "k%d_%d" % (tid, i)
        data[key] = {"i": i, "sq": i * i, "s": str(i) * (i % 7), "l": list(range(i % 13))}
    text = json.dumps(data, sort_keys=True)
    blob = pickle.dumps(sorted(data.items()), protocol=4)
    back = json.loads(text)
    assert back == data
    results[tid] = (len(text), hashlib.sha256(text.encode()).hexdigest(),
                    hashlib.sha256(blob).hexdigest())

threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
for t in threads: t.start()
for t in threads: t.join()
for tid in sorted(results):
    print(tid, *results[tid])
