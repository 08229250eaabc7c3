"""Annie's voice: the Pipecat pipeline (SmallWebRTC, Silero VAD, STT (Moonshine or Whisper),
Annie's chat turn, TTS), its backends chosen by settings, the voice sessions and the client
page."""
