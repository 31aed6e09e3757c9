// A JavaScript client: takes 10,000 IDs over HTTP with Node's built-in fetch
// and checks that they are strings, unique and increasing.
const base = process.argv[2];
const ids = [];
for (let i = 0; i < 100; i++) {
    const r = await fetch(`${base}/v1/ids`, {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify({ count: 100 }),
    });
    if (r.status !== 200) throw new Error(`status ${r.status}: ${await r.text()}`);
    const body = await r.json();
    for (const id of body.ids) {
        if (typeof id !== "string" || !/^[0-9]+$/.test(id)) throw new Error(`not a decimal string: ${id}`);
        ids.push(BigInt(id));
    }
}
if (ids.length !== 10000) throw new Error(`${ids.length} IDs`);
for (let i = 1; i < ids.length; i++)
    if (ids[i] <= ids[i - 1]) throw new Error(`ID ${i} (${ids[i]}) <= ID ${i - 1} (${ids[i - 1]})`);
if (new Set(ids.map(String)).size !== ids.length) throw new Error("duplicates");
// numbers would have lost them: the IDs are above 2^53
if (!ids.every((x) => x > 2n ** 53n)) throw new Error("IDs below 2^53: the test proves nothing");
console.log(`ok: 10000 IDs, unique, increasing, from ${ids[0]} to ${ids[ids.length - 1]}`);
