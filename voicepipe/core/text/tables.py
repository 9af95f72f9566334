"""Word tables of the TTS text front-end (core/text/norm.py, core/text/rules.py).

American English. Units and currencies carry (singular, plural) so "1 km" is
"one kilometer" and "1.5 km" "one point five kilometers".
"""

from __future__ import annotations

FULL_MONTHS = (
    "January February March April May June July August September October November December"
).split()
MONTH_OF = {m[:3].lower(): m for m in FULL_MONTHS} | {"sept": "September"}
# (singular, plural); one table for "5 km" and "1 km/h"; longer names first in the regex.
UNITS: dict[str, tuple[str, str]] = {
    "km/h": ("kilometer per hour", "kilometers per hour"),
    "kph": ("kilometer per hour", "kilometers per hour"),
    "mph": ("mile per hour", "miles per hour"),
    "m/s": ("meter per second", "meters per second"),
    "km": ("kilometer", "kilometers"),
    "cm": ("centimeter", "centimeters"),
    "mm": ("millimeter", "millimeters"),
    "nm": ("nanometer", "nanometers"),
    "m": ("meter", "meters"),
    "kg": ("kilogram", "kilograms"),
    "mg": ("milligram", "milligrams"),
    "g": ("gram", "grams"),
    "lb": ("pound", "pounds"),
    "lbs": ("pound", "pounds"),
    "oz": ("ounce", "ounces"),
    "ft": ("foot", "feet"),
    "mi": ("mile", "miles"),
    "yd": ("yard", "yards"),
    "ml": ("milliliter", "milliliters"),
    "mL": ("milliliter", "milliliters"),
    "L": ("liter", "liters"),
    "l": ("liter", "liters"),
    "sq ft": ("square foot", "square feet"),
    "sq mi": ("square mile", "square miles"),
    "km²": ("square kilometer", "square kilometers"),
    "m²": ("square meter", "square meters"),
    "Hz": ("hertz", "hertz"),
    "kHz": ("kilohertz", "kilohertz"),
    "MHz": ("megahertz", "megahertz"),
    "GHz": ("gigahertz", "gigahertz"),
    "KB": ("kilobyte", "kilobytes"),
    "kB": ("kilobyte", "kilobytes"),
    "MB": ("megabyte", "megabytes"),
    "GB": ("gigabyte", "gigabytes"),
    "TB": ("terabyte", "terabytes"),
    "Mbps": ("megabit per second", "megabits per second"),
    "Gbps": ("gigabit per second", "gigabits per second"),
    "W": ("watt", "watts"),
    "kW": ("kilowatt", "kilowatts"),
    "kWh": ("kilowatt hour", "kilowatt hours"),
    "MW": ("megawatt", "megawatts"),
    "V": ("volt", "volts"),
    "mAh": ("milliamp hour", "milliamp hours"),
    "ms": ("millisecond", "milliseconds"),
    "sec": ("second", "seconds"),
    "secs": ("second", "seconds"),
    "min": ("minute", "minutes"),
    "mins": ("minute", "minutes"),
    "hr": ("hour", "hours"),
    "hrs": ("hour", "hours"),
    "fps": ("frame per second", "frames per second"),
    "tbsp": ("tablespoon", "tablespoons"),
    "tsp": ("teaspoon", "teaspoons"),
    "USD": ("dollar", "dollars"),
    "EUR": ("euro", "euros"),
    "GBP": ("pound", "pounds"),
    "x": ("times", "times"),
}
# symbol: (singular, plural, cent singular, cent plural) — no sub-unit: read the decimal.
CURRENCY = {
    "$": ("dollar", "dollars", "cent", "cents"),
    "€": ("euro", "euros", "cent", "cents"),
    "£": ("pound", "pounds", "penny", "pence"),
    "¥": ("yen", "yen", "", ""),
    "₹": ("rupee", "rupees", "", ""),
}
SCALE = {"k": "thousand", "m": "million", "b": "billion", "bn": "billion"}
# Titles: expanded only before a capitalised word ("Dr. Smith", "St Paul").
TITLES = {
    "Dr": "Doctor", "Mr": "Mister", "Mrs": "Missus", "Ms": "Miz", "Prof": "Professor",
    "St": "Saint", "Mt": "Mount", "Gen": "General", "Gov": "Governor", "Sen": "Senator",
    "Rep": "Representative", "Capt": "Captain", "Lt": "Lieutenant", "Col": "Colonel",
    "Sgt": "Sergeant", "Rev": "Reverend", "Pres": "President", "Fr": "Father",
}  # fmt: skip
# Abbreviations whose period may also end the sentence (it is kept then).
ABBREV_STOP = {
    "etc.": "et cetera", "Jr.": "Junior", "Sr.": "Senior", "Inc.": "Incorporated",
    "Ltd.": "Limited", "Corp.": "Corporation", "Co.": "Company", "Ave.": "Avenue",
    "Blvd.": "Boulevard", "Rd.": "Road", "St.": "Street", "Dept.": "Department",
    "Univ.": "University", "approx.": "approximately", "Fig.": "Figure", "fig.": "figure",
    "Vol.": "Volume", "vol.": "volume", "Mon.": "Monday", "Tue.": "Tuesday",
    "Tues.": "Tuesday", "Wed.": "Wednesday", "Thu.": "Thursday", "Thurs.": "Thursday",
    "Fri.": "Friday", "Sat.": "Saturday", "Sun.": "Sunday", "et al.": "and others",
    "Dr.": "Doctor", "Mr.": "Mister", "Mrs.": "Missus", "Ms.": "Miz", "Prof.": "Professor",
}  # fmt: skip
# Abbreviations that introduce something: their period never ends the sentence.
ABBREV = {
    "e.g.": "for example", "i.e.": "that is", "vs.": "versus", "vs": "versus",
    "cf.": "compare", "viz.": "namely", "a.k.a.": "also known as", "w/o": "without",
    "w/": "with", "ca.": "circa",
}  # fmt: skip
FRACTIONS = {2: ("half", "halves"), 3: ("third", "thirds"), 4: ("quarter", "quarters")}
SYMBOLS = {
    "&": " and ", "+": " plus ", "=": " equals ", "×": " times ", "÷": " divided by ",
    "±": " plus or minus ", "≈": " about ", "≠": " is not equal to ", "≤": " at most ",
    "≥": " at least ", "→": " to ", "->": " to ", "=>": " to ", "^": " to the power of ",
    "@": " at ", "%": " percent ", "°": " degrees ", "²": " squared ", "³": " cubed ",
    "½": " one half ", "¼": " one quarter ", "¾": " three quarters ", "|": ", ", "—": ", ",
    "–": ", ", "--": ", ", "#": " ", "/": " ", "\\": " ", "_": " ", "*": " ", "`": " ",
    "~": " ", "<": " ", ">": " ", "§": " section ", "©": " ", "®": " ", "™": " ",
}  # fmt: skip
PER = "year|yr|month|week|day|night|hour|hr|minute|min|second|sec|person|head|kg|km|mile|liter"
TLDS = "com|org|net|io|edu|gov|ai|dev|co|uk|de|fr|app|info|me|us|tv"
