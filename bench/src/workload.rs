//! What each compared model is for, from its card (`models/cards/`): the
//! accuracy budget its lossy cells run under, and the rate its inputs
//! arrive at (a microphone's hop, a body sensor's), where a camera's 15
//! and 30 frames/s do not apply. The zoo's four models have no card: they
//! are classifiers, judged by their argmax.

use std::collections::BTreeMap;

use anyhow::Context;

/// The prefix of a TFLite model's name in the comparison (`tflite:face_landmark`).
pub const TFLITE: &str = "tflite:";

/// A camera's rates (Hz), for models whose inputs arrive at no rate of their own.
pub const CAMERA_RATES: [f64; 2] = [15.0, 30.0];

/// The zoo's classifiers.
const ZOO_BUDGETS: [(&str, &str); 4] = [
    ("text_rnn_lstm", "argmax"),
    ("mnist", "argmax"),
    ("deepear", "argmax"),
    ("mobilenet_v1_1.0_128", "argmax"),
];

/// One model's workload.
#[derive(Clone, Debug, PartialEq)]
pub struct Workload {
    /// The accuracy budget of lossy link encodings (`argmax`, `rel:X`);
    /// `None`: no lossy cells.
    pub budget: Option<String>,
    /// The rates its inputs arrive at in the source-rate cells (Hz).
    pub rates: Vec<f64>,
}

impl Default for Workload {
    /// No budget; a camera's rates.
    fn default() -> Self {
        Workload { budget: None, rates: CAMERA_RATES.to_vec() }
    }
}

/// The card-less name of `model` (a TFLite model's card is its ONNX twin's).
fn card_name(model: &str) -> &str {
    model.strip_prefix(TFLITE).unwrap_or(model)
}

/// The workload of each of `models`: its card's budget and source rate
/// (`rate_hz / hop` of an input), the zoo's argmax, or the default.
pub fn of(models: &[String]) -> anyhow::Result<BTreeMap<String, Workload>> {
    let mut out = BTreeMap::new();
    for m in models {
        let mut w = Workload::default();
        if let Some((_, b)) = ZOO_BUDGETS.iter().find(|(n, _)| *n == m) {
            w.budget = Some(b.to_string());
        }
        if let Some(path) = tandem_models::real::card_path(card_name(m)) {
            let card = tandem::card::ModelCard::load(&path).with_context(|| format!("{m}'s card"))?;
            w.budget = card.output.budget.clone();
            if let Some(hz) = card.source_hz() {
                w.rates = vec![hz];
            }
        }
        out.insert(m.clone(), w);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Budgets and rates come from the cards: a classifier by argmax, a
    /// wake-word head within a relative error at its 80 ms hop, a camera
    /// model at 15 and 30 frames/s; a TFLite model by its twin's card;
    /// every card's budget parses as `--accuracy` reads it.
    #[test]
    fn budgets_and_rates_come_from_the_cards() {
        let names: Vec<String> =
            ["mnist", "ppocr_cls_int8", "oww_alexa", "tflite:face_landmark", "eeg_seizure", "some.onnx"]
                .map(String::from)
                .to_vec();
        let w = of(&names).expect("cards");
        assert_eq!(w["mnist"], Workload { budget: Some("argmax".into()), rates: CAMERA_RATES.to_vec() });
        assert_eq!(w["ppocr_cls_int8"].budget.as_deref(), Some("argmax"));
        assert_eq!(w["oww_alexa"], Workload { budget: Some("rel:0.02".into()), rates: vec![12.5] });
        assert_eq!(w["tflite:face_landmark"].budget.as_deref(), Some("rel:0.01"));
        assert_eq!(w["eeg_seizure"].rates, vec![2.0]);
        assert_eq!(w["some.onnx"], Workload::default());
        let cards = std::fs::read_dir(tandem_models::real::cards_dir()).expect("cards dir");
        for card in cards {
            let path = card.expect("entry").path();
            let card = tandem::card::ModelCard::load(&path).expect("card");
            let budget =
                card.output.budget.as_deref().unwrap_or_else(|| panic!("{} has no budget", path.display()));
            tandem::client::Accuracy::parse(budget).expect("parses");
        }
    }
}
