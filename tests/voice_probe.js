// The page probe of tests/voice_e2e.py (added before the page's own script).
(() => {
  const BLOCK = 1024;
  const probe = window.__probe = {
    ctx: null, rate: 0, keepAudio: true, mic: null,
    messages: [], levels: { mic: [], annie: [] }, annie: [], annieSamples: 0, nodes: [],
  };
  const ctx = () => {
    if (!probe.ctx) { probe.ctx = new AudioContext(); probe.rate = probe.ctx.sampleRate; }
    return probe.ctx;
  };
  const rms = (x) => { let s = 0; for (let i = 0; i < x.length; i++) s += x[i] * x[i]; return Math.sqrt(s / x.length); };
  function tap(track, name) {
    const c = ctx();
    const source = c.createMediaStreamSource(new MediaStream([track]));
    const node = c.createScriptProcessor(BLOCK, 1, 1);
    node.onaudioprocess = (e) => {
      const x = e.inputBuffer.getChannelData(0);
      probe.levels[name].push([e.playbackTime, rms(x)]);
      if (name === "annie") {
        if (probe.keepAudio) probe.annie.push(new Float32Array(x));
        probe.annieSamples += x.length;
      }
    };
    source.connect(node); node.connect(c.destination);
    probe.nodes.push(source, node);  // keep the graph alive
  }
  const Base = window.RTCPeerConnection;
  window.RTCPeerConnection = class extends Base {
    constructor(...args) {
      super(...args);
      this.addEventListener("track", (e) => { if (e.track.kind === "audio") tap(e.track, "annie"); });
    }
    addTrack(track, ...streams) {
      if (track.kind === "audio") { probe.mic = track; tap(track, "mic"); }
      return super.addTrack(track, ...streams);
    }
    createDataChannel(...args) {
      const channel = super.createDataChannel(...args);
      channel.addEventListener("message", (e) => {
        let data; try { data = JSON.parse(e.data); } catch { return; }
        probe.messages.push({ data, annieAt: probe.annieSamples, t: probe.ctx ? probe.ctx.currentTime : 0, wall: performance.now() });
      });
      return channel;
    }
  };
  // Annie's samples from `start` (a sample index) as 16-bit PCM, base64.
  probe.annieSince = (start) => {
    const out = new Int16Array(Math.max(0, probe.annieSamples - start));
    let at = 0, skip = start;
    for (const chunk of probe.annie) {
      if (skip >= chunk.length) { skip -= chunk.length; continue; }
      for (let i = skip; i < chunk.length; i++) out[at++] = Math.max(-1, Math.min(1, chunk[i])) * 32767;
      skip = 0;
    }
    let bin = ""; const bytes = new Uint8Array(out.buffer);
    for (let i = 0; i < bytes.length; i += 32768) bin += String.fromCharCode.apply(null, bytes.subarray(i, i + 32768));
    return btoa(bin);
  };
})();
