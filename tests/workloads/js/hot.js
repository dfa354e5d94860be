// hot.js - proves JIT frames are named from /tmp/perf-PID.map: run under
// `node --perf-basic-prof`, the CPU goes to hotJavaScriptFunction.
//
// usage: node --perf-basic-prof hot.js SECONDS
function hotJavaScriptFunction(n) {
  let x = 1;
  for (let i = 0; i < n; i++) x = (x * 1103515245 + 12345) % 2147483648;
  return x;
}

const until = Date.now() + parseFloat(process.argv[2]) * 1000;
let s = 0;
while (Date.now() < until) s += hotJavaScriptFunction(200000);
console.log(s);
