// Imported first by main.ts, so that it runs before the body of any other
// module of the broker: static imports are evaluated in order, and main.ts's
// own body only after all of them.
//
// Keep the young generation (V8's new space) from growing. Under a steady
// request load V8 doubles it up to 2 × 16 MB, and the request garbage it
// then promotes grows the old space as well: RSS 150-160 MB at ~26k pushed
// msg/s, against ~98 MB with growth off at the same throughput (runs of
// bench/broker.mjs's batch-100 push). V8 reads this flag each time it
// considers growing, so setting it at run time works for a plain
// `node main.js`; --max-semi-space-size would need a command-line flag.
//
// Set in main.ts's body, as it was, the flag came after loading the modules
// had grown the new space to 16 MB; set here it is 8 MB (ESM parses the
// whole module graph before it evaluates the first module, and the parsing
// alone grows it that far). Either way the first idle stretch of ~10 s lets
// V8's memory reducer shrink it to 2 MB, where the flag then keeps it for
// good; what this changes is a broker busy from its start: RSS at start
// ~84 instead of ~88 MB, and in bench/peers.mjs (end-to-end only) 90 instead
// of 97 MB after the warm-up, 98 instead of 103 MB at the end-to-end peak.
//
// It trades throughput for that memory: V8's default growth drained 1.19x as
// fast in bench/versus-build.mjs (docs/performance.md), and a broker's memory
// target is not met by slowing every message down. So V8's growth is the
// default; QUEEN_FIXED_YOUNG_GENERATION=true holds the young generation for a
// deployment that counts megabytes more than messages per second.
import { setFlagsFromString } from 'node:v8';

if (process.env.QUEEN_FIXED_YOUNG_GENERATION === 'true') setFlagsFromString('--semi-space-growth-factor=1');
