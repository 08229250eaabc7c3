"""Annie's voice: the Pipecat pipeline (SmallWebRTC, Silero VAD, Whisper STT, Annie's chat turn,
TTS), its backends chosen by settings, the voice sessions and the client page."""
